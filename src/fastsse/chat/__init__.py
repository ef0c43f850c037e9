"""Chat completions: the fold and ``ChatStream`` (compiled ``_fold_c`` and its twin ``_fold_py``),
the cold half both share (``_result``: the result, the verdict), the server side (``encode``) and the
linter's rules (``lint``)."""
