"""The bottom layer: core configuration and the platform-neutral message types.

Every package of the project may import from here; nothing here imports the project. That is
what lets a channel speak in `IncomingMessage`s without pulling in the tool loop or a provider.
"""
