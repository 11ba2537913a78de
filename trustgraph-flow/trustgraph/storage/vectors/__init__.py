"""Vector stores for chunk and entity vectors: Qdrant Edge embedded by default, a
Qdrant server when ``QDRANT_URL`` is set. store.py is the interface; configured.py
picks one. (Kept empty: the Edge worker process imports this package, and should
start in milliseconds.)"""
