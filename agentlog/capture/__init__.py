"""The recorder layer: what a program does, written to the log as it happens.

Submodules are imported on use (``agentlog.capture.providers``, ``agentlog.capture.transport``, ...),
so importing this package pulls in nothing heavy.
"""
