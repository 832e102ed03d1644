/*
 * slot.c: CRC16-XMODEM and the hash tag rule (see slot.h). The table is
 * computed once from the polynomial rather than pasted in.
 */
#include "base/slot.h"

#include <pthread.h>
#include <string.h>

static uint16_t slot_table[256];
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

static void slot_init(void) {
    int i, b;
    for (i = 0; i < 256; i++) {
        uint16_t crc = (uint16_t)(i << 8);
        for (b = 0; b < 8; b++)
            crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        slot_table[i] = crc;
    }
}

uint16_t slot_crc16(const char *buf, size_t len) {
    uint16_t crc = 0;
    size_t i;
    pthread_once(&slot_once, slot_init);
    for (i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ slot_table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

void slot_tag(const char *key, size_t len, const char **tag, size_t *tlen) {
    const char *open = memchr(key, '{', len), *close;
    *tag = key;
    *tlen = len;
    if (open == NULL) return;
    close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
    if (close == NULL || close == open + 1) return;  /* none, or "{}": the whole key */
    *tag = open + 1;
    *tlen = (size_t)(close - open - 1);
}

int slot_of(const char *key, size_t len) {
    const char *tag;
    size_t tlen;
    slot_tag(key, len, &tag, &tlen);
    return slot_crc16(tag, tlen) & (SLOT_COUNT - 1);
}
