"""Transports: point-to-point bytes between two ranks (TCP between any hosts)."""
