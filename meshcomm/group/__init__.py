"""Groups: ranks, sub-groups, sequence numbers and the async queue between the faces and the executor."""
