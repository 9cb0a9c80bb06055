"""Point-to-point bytes between the ranks of one job, behind one interface (interface.Transport).

engine.SocketTransport drives the connections; tcp.py opens them, peer.py
frames the messages on each, shm.py is the shared-memory ring channel of
peers on one host (local.py finds them), cma.py reads and writes another
rank's memory for single-copy messages, matching.py pairs arrivals with
receives, notices.py carries failures between ranks.
"""
