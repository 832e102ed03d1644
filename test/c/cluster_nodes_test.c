/*
 * test/c/cluster_nodes_test.c: unit test of cluster_count_replicas
 * (cluster.c): each master's replicas from CLUSTER NODES' text, in Redis'
 * own format (7.0: "<id> <ip:port@cport[,hostname]> <flags> <master> <ping>
 * <pong> <epoch> <link> <slots...>"). No server.
 *
 * Checks:
 * - replicas counted under their master's address, whatever the order of
 *   the lines; "myself,slave" counts; a replica marked fail does not;
 * - a replica whose master id is unknown, or a master that is not in the
 *   snapshot, changes nothing; masters count as no replica;
 * - hostnames after the address, no trailing newline, CRLF;
 * - a snapshot whose nodes are named by hostname (CLUSTER SLOTS under
 *   cluster-preferred-endpoint-type hostname), in 7.0's and 7.2's forms
 *   (7.2 adds fields after the hostname), parsed from CLUSTER SLOTS' own
 *   reply; never fewer replicas than CLUSTER SLOTS listed;
 * - malformed, truncated and random text: no crash, counts never negative.
 *
 * Run by `make ctest` (and `make test`, `make sanitize`).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "topo/cluster.h"
#include "parse_reply.h"

static topo_snap *three_masters(void) {
    topo_snap *s = topo_snap_new(3, 1);
    int i;
    for (i = 0; i < 3; i++) {
        s->nodes[i].host = strdup("127.0.0.1");
        s->nodes[i].port = 7000 + i;
    }
    return s;
}

static void count(topo_snap *s, const char *text) {
    int i;
    for (i = 0; i < s->nnodes; i++) s->nodes[i].replicas = 0;
    cluster_count_replicas(s, text, strlen(text));
}

int main(void) {
    topo_snap *s = three_masters();
    char garbage[512];
    int i, k;
    const char *nodes =
        "r2 127.0.0.1:7004@17004 slave m1 0 1 2 connected\n"
        "m0 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n"
        "m1 127.0.0.1:7001@17001,host-b master - 0 1 2 connected 5461-10922\n"
        "r0 127.0.0.1:7003@17003 slave m0 0 1 1 connected\n"
        "r1 127.0.0.1:7005@17005 slave,fail m0 0 1 1 disconnected\n"
        "r3 127.0.0.1:7006@17006 myself,slave m1 0 1 2 connected\n"
        "m2 127.0.0.1:7002@17002 master - 0 1 3 connected 10923-16383\n"
        "rx 127.0.0.1:7007@17007 slave nosuchid 0 1 3 connected";
    count(s, nodes);
    CHECK(s->nodes[0].replicas == 1, "master 7000: %d (one up, one failed)", s->nodes[0].replicas);
    CHECK(s->nodes[1].replicas == 2, "master 7001: %d", s->nodes[1].replicas);
    CHECK(s->nodes[2].replicas == 0, "master 7002: %d", s->nodes[2].replicas);

    count(s, "m0 127.0.0.1:7000@17000 master - 0 0 1 connected 0-5460\r\n"
             "r0 127.0.0.1:7003@17003 slave m0 0 1 1 connected\r\n");
    CHECK(s->nodes[0].replicas == 1, "CRLF: %d", s->nodes[0].replicas);

    /* a master of the text that the snapshot does not have */
    count(s, "m9 10.0.0.9:7000@17000 master - 0 0 1 connected\nr9 127.0.0.1:1@2 slave m9 0 0 1 connected\n");
    for (i = 0; i < 3; i++) CHECK(s->nodes[i].replicas == 0, "unknown master: node %d %d", i, s->nodes[i].replicas);

    /* malformed: no words, one word, an address without a port */
    {
        const char *bad[] = {"", "\n", "   \n  \n", "slave", "r0 x slave", "r0 127.0.0.1:7003 slave m0",
                             "m0 127.0.0.1@17000 master -\nr0 a slave m0\n", "m0 :7000 master -\nr a slave m0",
                             "m0 127.0.0.1: master -\nr a slave m0", "m0 127.0.0.1:7000", NULL};
        for (k = 0; bad[k]; k++) {
            count(s, bad[k]);
            for (i = 0; i < 3; i++) CHECK(s->nodes[i].replicas >= 0, "bad %d: node %d", k, i);
        }
    }

    /* random bytes over the alphabet of the format */
    for (k = 0; k < 20000; k++) {
        static const char alphabet[] = "m0r1 27.:@-,\nslavefailmaster7000";
        size_t n = (size_t)(check_rand() % sizeof garbage);
        for (i = 0; i < (int)n; i++) garbage[i] = alphabet[check_rand() % (sizeof alphabet - 1)];
        for (i = 0; i < s->nnodes; i++) s->nodes[i].replicas = 0;
        cluster_count_replicas(s, garbage, n);
        for (i = 0; i < 3; i++) CHECK(s->nodes[i].replicas >= 0, "random %d: node %d", k, i);
    }
    topo_snap_free(s);

    {
        /* CLUSTER SLOTS: 0-5460 on localhost:17710, its replica localhost:17715 */
        static const char slots[] =
            "*1\r\n*4\r\n:0\r\n:5460\r\n"
            "*4\r\n$9\r\nlocalhost\r\n:17710\r\n$3\r\nm00\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
            "*4\r\n$9\r\nlocalhost\r\n:17715\r\n$3\r\nr00\r\n*2\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n";
        static const char *const forms[] = {
            "r00 127.0.0.1:17715@18715,localhost slave m00 0 1795872306329 1 connected\n"
            "m00 127.0.0.1:17710@18710,localhost myself,master - 0 1795872305000 1 connected 0-5460\n",
            "r00 127.0.0.1:17715@18715,localhost,shard-id=abc slave m00 0 1 1 connected\n"
            "m00 127.0.0.1:17710@18710,localhost,shard-id=abc myself,master - 0 1 1 connected 0-5460\n",
        };
        char err[128];
        topo_node asked;
        redisReply *r = parse(slots, sizeof slots - 1);
        memset(&asked, 0, sizeof asked);
        asked.host = (char *)"127.0.0.1";
        asked.port = 17710;
        s = cluster_parse_slots(r, &asked, err, sizeof err);
        CHECK(s != NULL && s->nnodes == 1 && s->nodes[0].replicas == 1, "CLUSTER SLOTS by hostname: %s", err);
        for (k = 0; s && k < 2; k++) {
            s->nodes[0].replicas = 0;
            cluster_count_replicas(s, forms[k], strlen(forms[k]));
            CHECK(s->nodes[0].replicas == 1, "hostname endpoints, form %d: %d replica(s)", k, s->nodes[0].replicas);
        }
        if (s) {
            /* CLUSTER SLOTS said 1, CLUSTER NODES names nobody we know */
            s->nodes[0].replicas = 1;
            cluster_count_replicas(s, "", 0);
            CHECK(s->nodes[0].replicas == 1, "below CLUSTER SLOTS' count: %d", s->nodes[0].replicas);
        }
        topo_snap_free(s);
        freeReplyObject(r);
    }
    return check_report("cluster_nodes_test");
}
