# cython: language_level=3
# The compiled relay's C entry point, for the compiled byte-out stream.

# Relay.write(data) with what it returns framed as one HTTP/1.1 chunk (``<hex size>\r\n`` bytes
# ``\r\n``, b"" when there is nothing to send): for a WireSink, whose own framing would copy the
# bytes again. None when ``relay`` is not a compiled Relay.
cdef bytes relay_write_framed(object relay, object data)

# Relay.complete without the attribute look-up (read after every write of a stream that asks for
# it): 1 or 0, -1 when ``relay`` is not a compiled Relay.
cdef int relay_complete(object relay) except -2
