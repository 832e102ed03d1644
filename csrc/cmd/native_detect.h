/*
 * native_detect.h: learning, per node and per connection, which native
 * compare commands (native_cmd.h) the server has. No Lua here.
 *
 * By feature, never by version (Valkey reports redis_version:7.2.4). Two
 * requests ride in the connection handshake (conn_handshake.c), within its one
 * connect deadline, on every (re)connect:
 *
 *   COMMAND INFO DELIFEQ DELEX CAD CAS
 *       an array in that order, nil for a command the server does not have
 *   SET <probe key> <v> IFEQ <c> PX 1
 *       the IFEQ option of SET can only be learned by trying: servers
 *       without it answer a syntax error, servers with it answer nil
 *       (the key is absent, or holds neither value: nothing is written)
 *
 * Whatever goes wrong (NOPERM for an ACL user without +command, MOVED in a
 * cluster, an error, a reply of another shape) means "not there": the
 * feature is not used, and connecting goes on as if nothing was asked.
 *
 * The probe key is redislock:probe, and in a Cluster redislock:probe:{N}
 * with N chosen so that its slot is one the node serves (else the answer
 * would be MOVED). An ACL user needs ~redislock:probe* for the SET probe.
 */
#ifndef REDISLOCK_NATIVE_DETECT_H
#define REDISLOCK_NATIVE_DETECT_H

#include <stddef.h>
#include <stdint.h>
#include <hiredis.h>

#define NATIVE_PROBE_KEY "redislock:probe"
#define NATIVE_PROBE_KEY_MAX 32
#define NATIVE_DETECT_MAX_ARGS 7

struct conn;

/* What a connection's handshake learns of its node, kept by its owner
 * (exec_conn.h) and filled in by the handshake's hook. */
typedef struct native_state {
    unsigned bits;              /* NATIVE_* bits (native_cmd.h) the node has, as
                                   the last handshake said: 0 until its
                                   replies are read, cleared for a command
                                   the node then refuses */
    unsigned assume;            /* tests only: bits claimed after every
                                   detection, as if the node had said so */
    int off;                    /* never detect nor use native commands */
    char probe_key[NATIVE_PROBE_KEY_MAX];   /* the SET IFEQ probe's key ("": none) */
} native_state;

/* The requests, written into argv/lens (room for NATIVE_DETECT_MAX_ARGS);
 * each returns its argc. */
int native_detect_commands_argv(const char **argv, size_t *lens);
int native_detect_probe_argv(const char *key, const char **argv, size_t *lens);

/* Their replies, as feature bits (NATIVE_* of native_cmd.h). */
unsigned native_detect_commands(const redisReply *r);
unsigned native_detect_probe(const redisReply *r);

/* The probe key for node `node` of a cluster slot map (slot_node: node
 * index per slot), or NATIVE_PROBE_KEY when slot_node is NULL (one node,
 * Sentinel's master, a Redlock master). 0, or -1 with buf "" when the
 * node serves no slot (then the SET probe is not sent). */
int native_probe_key(const uint16_t *slot_node, int node, char *buf, size_t len);

/* Turns detection on for a connection to a data node, into ns (which
 * must live as long as c), with its probe key (as native_probe_key).
 * Takes effect at its next handshake. */
void native_conn_setup(struct conn *c, native_state *ns, const uint16_t *slot_node, int node);

#endif
