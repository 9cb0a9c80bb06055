"""Traces of what each rank did: Chrome trace event files written under MESHCOMM_TRACE, merged per job."""
