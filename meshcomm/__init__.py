"""meshcomm: collective communication for Python processes."""
