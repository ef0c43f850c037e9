"""What only the command line runs: ``demo``, ``bench`` and its corpora and contenders.

``python -m fastsse COMMAND`` dispatches here (``fastsse/__main__.py``); ``import fastsse`` never
imports this package.
"""
