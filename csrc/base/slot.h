/*
 * slot.h: Redis Cluster's key -> hash slot map. No Lua here.
 *
 * slot = CRC16-XMODEM(tag) mod 16384, where tag is the text between the
 * first '{' and the first '}' after it when that text is non-empty, and the
 * whole key otherwise. So "{user1}.x" and "{user1}.y" share a slot,
 * "}{x}" hashes "x", "foo{}{bar}" hashes the whole key, and "foo{{bar}}"
 * hashes "{bar".
 */
#ifndef REDISLOCK_SLOT_H
#define REDISLOCK_SLOT_H

#include <stddef.h>
#include <stdint.h>

#define SLOT_COUNT 16384

/* CRC16-XMODEM (poly 0x1021, init 0): "123456789" -> 0x31C3. */
uint16_t slot_crc16(const char *buf, size_t len);

/* The part of key that is hashed (see above). */
void slot_tag(const char *key, size_t len, const char **tag, size_t *tlen);

/* The hash slot of key, 0..16383. */
int slot_of(const char *key, size_t len);

#endif
