"""Groups: ranks, sub-groups, sequence numbers and the async queue between the faces and the executor.

`WORLD` and `NON_GROUP_MEMBER` are torch's `dist.group` sentinels: torch
code spells the default group `dist.group.WORLD`, and after
`import meshcomm as dist` that name is this package.
"""

WORLD = None  # the default group: every meshcomm function reads None as it
NON_GROUP_MEMBER = object()  # what new_group gives a rank outside the group
