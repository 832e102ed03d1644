/*
 * topo_mode.h: the kinds of topology, as the request rules tell them apart
 * (recovery.h: what a refusal asks for differs by mode). The topology
 * itself, where keys live, is topo.h's. No Lua here.
 */
#ifndef REDISLOCK_TOPO_MODE_H
#define REDISLOCK_TOPO_MODE_H

enum topo_mode {
    TOPO_SINGLE = 0,    /* one node, as configured */
    TOPO_SENTINEL,      /* the master the sentinels name */
    TOPO_CLUSTER,       /* the slot map */
    TOPO_REDLOCK        /* independent masters, a quorum decides */
};

#endif
