package handoff

// sysFstatat is fstatat(2), whose struct stat is syscall.Stat_t.
const sysFstatat = 79
