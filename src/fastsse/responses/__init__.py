"""The OpenAI Responses API: the fold and ``ResponsesStream`` (compiled ``_fold_c``, twin ``_fold_py``),
the cold half (``_result``), the server side (``encode``) and the linter's rules (``lint``)."""
