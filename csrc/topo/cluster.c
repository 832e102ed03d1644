/*
 * cluster.c: CLUSTER SLOTS into a slot map (see cluster.h).
 */
#define _GNU_SOURCE
#include "topo/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/deadline.h"
#include "base/monotime.h"
#include "base/slot.h"

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

/* One line of CLUSTER NODES as far as counting replicas goes. */
typedef struct cluster_line {
    const char *id, *master;    /* its id; a replica's master's id */
    size_t id_len, master_len;
    int replica;                /* a replica not marked fail */
    int node;                   /* a master's index in the snapshot, or -1 */
} cluster_line;

/* The index in s of the node at "ip:port@cport[,hostname[,...]]": the
 * node whose host is that ip, or that hostname (CLUSTER SLOTS names a node
 * by its hostname under cluster-preferred-endpoint-type hostname), or -1. */
static int cluster_node_at(const topo_snap *s, const char *addr, size_t len) {
    const char *end = addr + len, *at = memchr(addr, '@', len), *colon, *name = NULL, *name_end;
    size_t ip_len, name_len = 0;
    int i, port;
    if (at == NULL) at = end;
    for (colon = at; colon > addr && colon[-1] != ':'; colon--) {}
    if (colon == addr) return -1;
    ip_len = (size_t)(colon - 1 - addr);
    port = atoi(colon);
    if (at < end && (name = memchr(at, ',', (size_t)(end - at))) != NULL) {
        name++;
        name_end = memchr(name, ',', (size_t)(end - name));
        name_len = (size_t)((name_end ? name_end : end) - name);
    }
    for (i = 0; i < s->nnodes; i++) {
        size_t hl = strlen(s->nodes[i].host);
        if (s->nodes[i].port != port) continue;
        if ((hl == ip_len && memcmp(s->nodes[i].host, addr, hl) == 0) ||
            (name_len > 0 && hl == name_len && memcmp(s->nodes[i].host, name, hl) == 0))
            return i;
    }
    return -1;
}

void cluster_count_replicas(topo_snap *s, const char *text, size_t len) {
    const char *p = text, *end = text + len;
    cluster_line *lines;
    int *count, n = 0, cap = 0, i, j;
    for (i = 0; (size_t)i < len; i++) cap += text[i] == '\n';
    cap++;
    lines = calloc((size_t)cap, sizeof *lines);
    count = calloc((size_t)(s->nnodes > 0 ? s->nnodes : 1), sizeof *count);
    if (lines == NULL || count == NULL) goto done;   /* (CLUSTER SLOTS' count stands) */
    while (p < end && n < cap) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *w[4];
        size_t wl[4];
        cluster_line *l = &lines[n];
        if (eol == NULL) eol = end;
        cluster_node_words(p, eol, w, wl);
        p = eol + 1;
        if (!w[3]) continue;
        l->id = w[0];
        l->id_len = wl[0];
        l->master = w[3];
        l->master_len = wl[3];
        /* a replica, unless it is down: one that is can be promoted by
         * nobody (and counts again once it is back, at the next load) */
        l->replica = cluster_has_flag(w[2], wl[2], "slave") && !cluster_has_flag(w[2], wl[2], "fail");
        l->node = cluster_has_flag(w[2], wl[2], "master") ? cluster_node_at(s, w[1], wl[1]) : -1;
        n++;
    }
    for (i = 0; i < n; i++) {
        if (!lines[i].replica) continue;
        for (j = 0; j < n; j++)
            if (lines[j].node >= 0 && lines[j].id_len == lines[i].master_len &&
                memcmp(lines[j].id, lines[i].master, lines[i].master_len) == 0) {
                count[lines[j].node]++;
                break;
            }
    }
    /* never fewer than CLUSTER SLOTS listed: a master this text names
     * otherwise (an address it does not match) keeps that count */
    for (i = 0; i < s->nnodes; i++)
        if (count[i] > s->nodes[i].replicas) s->nodes[i].replicas = count[i];
done:
    free(lines);
    free(count);
}

topo_snap *cluster_snap_of(const redisReply *slots, const redisReply *nodes, const topo_node *asked, char *err,
                           size_t errlen) {
    topo_snap *s;
    if (slots->type == REDIS_REPLY_ERROR) {
        snprintf(err, errlen, "redis error: %.*s", (int)(slots->len > 120 ? 120 : slots->len), slots->str);
        return NULL;
    }
    s = cluster_parse_slots(slots, asked, err, errlen);
    if (s && nodes && nodes->type == REDIS_REPLY_STRING)   /* (RESP2: a bulk string) */
        cluster_count_replicas(s, nodes->str, nodes->len);
    return s;
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
    if (r == NULL) snprintf(err, errlen, "%s", c->errstr);
    else s = cluster_snap_of(r, rn, n, err, errlen);
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
