/*
 * script_load.c: the SCRIPT LOAD queued before every EVAL (script.h).
 *
 * EVAL alone would re-cache the script too, but Redis 8 evicts the scripts
 * EVAL created once there are more than 500 of them (least recently used
 * first), while one created by SCRIPT LOAD stays until SCRIPT FLUSH. On a
 * server shared with clients that EVAL a new script per call, ours would
 * be evicted again and again: every eviction a NOSCRIPT round trip, and in
 * a Redlock fan-out a late NOSCRIPT that is dropped (fanout.c). The EVAL
 * after the load still runs the script whatever the load answered, so a
 * node that refuses SCRIPT LOAD (an ACL, a renamed command) costs nothing
 * but the refusal, once per connection (conn_note_dropped).
 */
#include "script.h"

#include "monotime.h"

int script_queue_load(conn *c, const script_def *s) {
    const char *argv[3];
    size_t lens[3];
    if (c->no_script_load) return 0;
    argv[0] = "SCRIPT";
    lens[0] = 6;
    argv[1] = "LOAD";
    lens[1] = 4;
    argv[2] = s->source;
    lens[2] = s->len;
    return conn_append(c, 3, argv, lens) == 0 ? 1 : -1;
}

int script_queue_load_skipped(conn *c, const script_def *s) {
    int k = script_queue_load(c, s);
    if (k == 1) {
        if (c->skip == 0) c->skip_since = monotime_us();
        c->skip++;
    }
    return k;
}
