/*
 * script_answer.h: the shape of each embedded script's answer, and whether
 * a reply has it. No Lua here.
 *
 * A script answers with one of a few shapes (its header comment says which:
 * acquire {1, fence}, {0, pttl} or {0, pttl, label, held_ms}; extend 1 or
 * 0), and the policy above reads those shapes: a first element 0 is
 * "busy", an extend's 0 "not held". A reply of another shape (+OK, an
 * integer 7 from extend, an array of one) comes from something that is not
 * Redis running our script (a proxy, a fake, a broken server), and read by
 * those rules it would be a grant, a refusal or a renewal it is not. So the
 * request machine (exec.c) checks every script's answer here before anyone
 * reads it, and one of any other shape fails its call as a protocol error
 * of kind "redis". An error reply is not checked: it is Redis' refusal,
 * for the caller (or the recovery rules) to read.
 *
 * A shape is written as forms separated by '|'; a form is one code (a
 * scalar answer) or codes in brackets (an array of exactly that many):
 *   i  an integer            0-9  that integer
 *   s  a bulk string         n    a bulk string or nil (Lua's false)
 *   j  an integer or nil     a    an array, whatever it holds
 * e.g. acquire "[1i]|[0i]|[0isi]", extend "0|1". script_answer.c has the
 * table, one line per script; test/c/script_answer_test.c checks that
 * every script has one, and the specs that run every script on a real
 * Redis check each shape against what it answers.
 */
#ifndef REDISLOCK_SCRIPT_ANSWER_H
#define REDISLOCK_SCRIPT_ANSWER_H

#include <stddef.h>
#include <hiredis.h>

#include "cmd/script.h"

/* s's shape, or NULL when the table has none for it. */
const char *script_answer_shape(const script_def *s);

/* Whether r may be s's answer: of its shape, or an error reply. */
int script_answer_ok(const script_def *s, const redisReply *r);

/* The same for an integer answer v read in place (conn_reply_int). */
int script_answer_int_ok(const script_def *s, long long v);

/* What r is, for a message: "a status", "the integer 7", "an array of 3",
 * "a string", "nil" (never its text: it could be anything). */
void script_answer_describe(const redisReply *r, char *buf, size_t len);

#endif
