"""What the typed-event folds (Responses, Messages) share: the fused stream base (compiled
``_stream_c``, pure ``_stream_py``), the verdict and helpers (``_base``) and the event-grammar linter base
(``lint``)."""
