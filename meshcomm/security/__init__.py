"""Security of every connection a job opens: the job token's handshake (auth) and TLS (tls), below both the store and the data channels."""
