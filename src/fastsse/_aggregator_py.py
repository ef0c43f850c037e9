"""Placeholder: the chat delta fold lands with the ChatAggregator issue."""

from __future__ import annotations


class ChatAggregator:
    pass


class ChatStream:
    pass
