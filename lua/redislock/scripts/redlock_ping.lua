-- redlock_ping: does this Redlock master answer us? (connect asks every
-- master at once and needs a majority.)
-- Returns 1.
return 1
