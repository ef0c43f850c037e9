# cython: language_level=3, freethreading_compatible=True
"""Placeholder: the compiled chat delta fold lands with the ChatAggregator issue."""


cdef class ChatAggregator:
    pass


cdef class ChatStream:
    pass
