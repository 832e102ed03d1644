/*
 * cluster.c: CLUSTER SLOTS into a slot map (see cluster.h).
 */
#define _GNU_SOURCE
#include "cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deadline.h"
#include "monotime.h"
#include "slot.h"

#define CLUSTER_TRY_MS 1000

/* The index of the node host:port in s, added if new; -1 when full. */
static int cluster_node_index(topo_snap *s, const char *host, size_t hlen, int port) {
    int i;
    for (i = 0; i < s->nnodes; i++)
        if (s->nodes[i].port == port && strlen(s->nodes[i].host) == hlen &&
            memcmp(s->nodes[i].host, host, hlen) == 0)
            return i;
    if (s->nnodes >= TOPO_MAX_NODES) return -1;
    s->nodes[s->nnodes].host = strndup(host, hlen);
    if (s->nodes[s->nnodes].host == NULL) return -1;
    s->nodes[s->nnodes].port = port;
    return s->nnodes++;
}

topo_snap *cluster_parse_slots(const redisReply *r, const topo_node *asked, char *err, size_t errlen) {
    topo_snap *s;
    size_t i;
    if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
        snprintf(err, errlen, "CLUSTER SLOTS: not an array");
        return NULL;
    }
    s = topo_snap_new(TOPO_MAX_NODES, 1);
    if (s == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    s->nnodes = 0;
    for (i = 0; i < r->elements; i++) {
        const redisReply *range = r->element[i], *m;
        const char *host;
        size_t hlen;
        long long lo, hi, k;
        int idx;
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3 ||
            range->element[0]->type != REDIS_REPLY_INTEGER ||
            range->element[1]->type != REDIS_REPLY_INTEGER ||
            range->element[2]->type != REDIS_REPLY_ARRAY || range->element[2]->elements < 2)
            goto bad;
        lo = range->element[0]->integer;
        hi = range->element[1]->integer;
        m = range->element[2];
        if (lo < 0 || hi >= SLOT_COUNT || lo > hi || m->element[0]->type != REDIS_REPLY_STRING ||
            m->element[1]->type != REDIS_REPLY_INTEGER || m->element[1]->integer < 1 ||
            m->element[1]->integer > 65535)
            goto bad;
        host = m->element[0]->str;
        hlen = m->element[0]->len;
        if (hlen == 0 || (hlen == 1 && host[0] == '?')) {
            /* "" means the node we asked; "?" a node whose address is unknown */
            if (hlen == 1 || asked == NULL || asked->host == NULL) continue;
            host = asked->host;
            hlen = strlen(host);
        }
        idx = cluster_node_index(s, host, hlen, (int)m->element[1]->integer);
        if (idx < 0) goto bad;
        /* (the range's replicas follow its master: a failover may promote
         * one of them, see topo_node.h) */
        if ((int)(range->elements - 3) > s->nodes[idx].replicas) s->nodes[idx].replicas = (int)(range->elements - 3);
        for (k = lo; k <= hi; k++) s->slot_node[k] = (uint16_t)idx;
    }
    if (s->nnodes == 0) {
        snprintf(err, errlen, "CLUSTER SLOTS: no slot is served");
        topo_snap_free(s);
        return NULL;
    }
    return s;
bad:
    snprintf(err, errlen, "CLUSTER SLOTS: malformed reply");
    topo_snap_free(s);
    return NULL;
}

/* One line of CLUSTER NODES, "<id> <ip:port@cport[,host]> <flags> <master
 * id> ...": its words, at most 4 (NULL when absent), as pointers into the
 * line with their lengths. */
static void cluster_node_words(const char *p, const char *end, const char **w, size_t *wl) {
    int k;
    for (k = 0; k < 4; k++) {
        while (p < end && *p == ' ') p++;
        w[k] = p < end ? p : NULL;
        while (p < end && *p != ' ') p++;
        wl[k] = w[k] ? (size_t)(p - w[k]) : 0;
    }
}

/* Whether flags (a comma list) has the flag f. */
static int cluster_has_flag(const char *flags, size_t len, const char *f) {
    size_t fl = strlen(f), i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && flags[j] != ',') j++;
        if (j - i == fl && memcmp(flags + i, f, fl) == 0) return 1;
        i = j + 1;
    }
    return 0;
}

/* The master whose id is id[0..len) in CLUSTER NODES text, as host:port:
 * its index in s, or -1. */
static int cluster_master_index(const topo_snap *s, const char *text, size_t tlen, const char *id, size_t len) {
    const char *p = text, *end = text + tlen;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *w[4], *colon, *at;
        size_t wl[4];
        int i;
        if (eol == NULL) eol = end;
        cluster_node_words(p, eol, w, wl);
        p = eol + 1;
        if (!w[1] || wl[0] != len || memcmp(w[0], id, len) != 0) continue;
        at = memchr(w[1], '@', wl[1]);
        if (at == NULL) at = w[1] + wl[1];
        for (colon = at; colon > w[1] && colon[-1] != ':'; colon--) {}
        if (colon == w[1]) return -1;
        for (i = 0; i < s->nnodes; i++)
            if (s->nodes[i].port == atoi(colon) && strlen(s->nodes[i].host) == (size_t)(colon - 1 - w[1]) &&
                memcmp(s->nodes[i].host, w[1], (size_t)(colon - 1 - w[1])) == 0)
                return i;
        return -1;
    }
    return -1;
}

void cluster_count_replicas(topo_snap *s, const char *text, size_t len) {
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *w[4];
        size_t wl[4];
        int m;
        if (eol == NULL) eol = end;
        cluster_node_words(p, eol, w, wl);
        p = eol + 1;
        /* a replica, unless it is down: one that is can be promoted by
         * nobody (and counts again once it is back, at the next load) */
        if (!w[3] || !cluster_has_flag(w[2], wl[2], "slave") || cluster_has_flag(w[2], wl[2], "fail")) continue;
        m = cluster_master_index(s, text, len, w[3], wl[3]);
        if (m >= 0 && s->nodes[m].replicas >= 0) s->nodes[m].replicas++;
    }
}

/* Asks node n for its view of the cluster: CLUSTER SLOTS for the map, and
 * CLUSTER NODES for every master's replicas (CLUSTER SLOTS leaves out a
 * replica that has no data yet, which a failover can still promote); when
 * a node refuses CLUSTER NODES (an ACL), CLUSTER SLOTS' count stands. */
static topo_snap *cluster_ask(const topo_src *src, topo_node *n, int may_resolve, int64_t deadline,
                              char *err, size_t errlen) {
    const char *slots[2] = {"CLUSTER", "SLOTS"}, *nodes[2] = {"CLUSTER", "NODES"};
    size_t lens[2] = {7, 5};
    conn_config cfg;
    conn *c;
    redisReply *r = NULL, *rn = NULL;
    topo_snap *s = NULL;
    cfg = *src->cfg;
    cfg.db = 0;
    c = topo_node_conn(n, &cfg, may_resolve, deadline, CLUSTER_TRY_MS, err, errlen);
    if (c == NULL) return NULL;
    if (conn_ensure(c) == 0 && conn_append(c, 2, slots, lens) == 0 && conn_append(c, 2, nodes, lens) == 0 &&
        (r = conn_read(c, conn_deadline(c))) != NULL)
        rn = conn_read(c, conn_deadline(c));
    if (r == NULL) {
        snprintf(err, errlen, "%s", c->errstr);
    } else if (r->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis error: %.*s", (int)(r->len > 120 ? 120 : r->len), r->str);
    } else {
        s = cluster_parse_slots(r, n, err, errlen);
        if (s && rn && rn->type == REDIS_REPLY_STRING) {   /* (RESP2: a bulk string) */
            int i;
            for (i = 0; i < s->nnodes; i++) s->nodes[i].replicas = 0;
            cluster_count_replicas(s, rn->str, rn->len);
        }
    }
    if (r) freeReplyObject(r);
    if (rn) freeReplyObject(rn);
    conn_free(c);
    return s;
}

int cluster_load(const topo_src *src, const topo_snap *cur, int may_resolve, int64_t deadline, topo_snap **out,
                 char *err, size_t errlen, const char **kind) {
    topo_snap *s = NULL;
    int i, tried = 0;
    char last[CONN_ERRSTR_LEN] = "no node given";
    /* the nodes we know first, then the seeds */
    for (i = 0; !s && cur && i < cur->nnodes && !deadline_passed(deadline); i++, tried++) {
        topo_node n = cur->nodes[i];   /* a shallow copy: cur is held */
        s = cluster_ask(src, &n, may_resolve, deadline, last, sizeof last);
    }
    for (i = 0; !s && i < src->nseeds && !deadline_passed(deadline); i++, tried++) {
        topo_node n;
        pthread_mutex_lock(src->mu);
        n = src->seeds[i];
        pthread_mutex_unlock(src->mu);
        s = cluster_ask(src, &n, may_resolve, deadline, last, sizeof last);
        pthread_mutex_lock(src->mu);
        if (src->seeds[i].addrs.n == 0) src->seeds[i].addrs = n.addrs;   /* resolved now */
        pthread_mutex_unlock(src->mu);
    }
    if (s == NULL) {
        snprintf(err, errlen, "cluster unreachable (asked %d node%s; last: %.140s)", tried,
                 tried == 1 ? "" : "s", last);
        *kind = strstr(last, "redis error") ? "redis" : strstr(last, "timed out") ? "timeout" : "connection";
        return -1;
    }
    /* the map's nodes are addresses as the cluster announces them (IPs,
     * unless it announces host names: those only a thread that may
     * resolve can reach) */
    for (i = 0; i < s->nnodes; i++) {
        char ignore[160];
        topo_node_resolve(&s->nodes[i], may_resolve, deadline, ignore, sizeof ignore);
    }
    *out = s;
    return 0;
}
