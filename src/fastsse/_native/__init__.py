"""Byte-level primitives for the compiled folds, as ``.pxd`` files only (nothing to import here).

``reader.pxd``: the validating JSON byte reader (one ``Span``, one unescape) every compiled fold reads
payloads with; ``outbuf.pxd``: the growable output buffer of the relay and the translators;
``json_out.pxd``: the JSON string writer that re-encodes a string exactly as ``orjson.dumps`` does.
"""
