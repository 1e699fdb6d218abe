package store

import "time"

// SetHeadsEvery sets how often a checkpoint rewrites the heads file, for a test's process.
func SetHeadsEvery(d time.Duration) { headsEvery = d }
