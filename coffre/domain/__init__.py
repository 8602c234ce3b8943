"""The domain core shared by the three services: event catalogue, XML codec, normalization.

Nothing here does I/O beyond parsing the bytes it is given: the services wrap it.
"""
