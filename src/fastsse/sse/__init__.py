"""The WHATWG event-stream scanner: ``Decoder`` and ``Event`` (compiled ``_decoder_c`` and its twin
``_decoder_py``; ``fastsse._backend`` picks one) and the field rules both share (``_fields``)."""
