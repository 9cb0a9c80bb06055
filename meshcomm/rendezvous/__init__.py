"""Rendezvous: the key-value store and how a process learns its rank, size and peers."""
