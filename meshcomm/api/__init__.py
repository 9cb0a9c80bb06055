"""The torch.distributed-style face: each function checks its arguments, finds the group, and calls one method on it."""
