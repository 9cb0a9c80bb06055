"""meshcomm as a Ray collective backend: `ray.util.collective` calls between actors run on meshcomm.

    import meshcomm.ray
    meshcomm.ray.create_group(actors, group_name="params")     # from the driver
    # in each actor:
    ray.util.collective.allreduce(array, group_name="params")

`create_group` registers the "MESHCOMM" backend in the driver and in every
actor, hands every actor a fresh job token made by the driver, and creates
the group at once (each actor's process joins it). Ray's own
`create_collective_group(..., backend="MESHCOMM")` and
`init_collective_group` work too, once `meshcomm.ray.register()` ran in the
driver and in each actor; such a group's connections are authenticated with
the actors' MESHCOMM_TOKEN, if they have one.

The group's rendezvous goes through Ray's key-value store, so no port is
chosen by hand: rank 0 serves meshcomm's store on an ephemeral port of its
node and publishes its address there. Actors of one node then talk through
shared memory, actors of different nodes over TCP. Nothing here is imported
by `import meshcomm`; this module needs Ray (`pip install "meshcomm[ray]"`).
"""

from meshcomm.ray.group import BACKEND, MeshcommGroup, create_group, destroy_group, register

__all__ = ["BACKEND", "MeshcommGroup", "create_group", "destroy_group", "register"]
