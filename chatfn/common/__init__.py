"""The bottom layer: core configuration, the platform-neutral message types, and the helpers
every layer shares (the fetch helper for URLs users give, the thread pools for user work).

Every package of the project may import from here; nothing here imports the project. That is
what lets a channel speak in `IncomingMessage`s without pulling in the tool loop or a provider.
"""
