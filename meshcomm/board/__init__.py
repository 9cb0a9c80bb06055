"""The shared-memory board of a group on one host: its segment (segment.py), the calls that run on it (run.py), their price (price.py) and a group's seat at it (seat.py)."""
