package handoff

// sysFstatat is newfstatat(2), whose struct stat is syscall.Stat_t.
const sysFstatat = 262
