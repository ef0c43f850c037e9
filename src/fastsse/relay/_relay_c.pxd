# cython: language_level=3
# The compiled relay's C entry point, for the compiled byte-out stream.

# Relay.write(data) with what it returns framed as one HTTP/1.1 chunk (``<hex size>\r\n`` bytes
# ``\r\n``, b"" when there is nothing to send): for a WireSink, whose own framing would copy the
# bytes again. None when ``relay`` is not a compiled Relay.
cdef bytes relay_write_framed(object relay, object data)
