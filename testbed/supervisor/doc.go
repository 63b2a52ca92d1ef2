// Package supervisor is the process supervisor of the cluster test bed: it starts test
// binaries (a felix-broker, a control plane, a helper), waits for them to be ready, stops,
// pauses, kills and restarts them, and applies disk faults to their data between runs.
//
// A Supervisor (New, or NewForTest for a *testing.T whose cleanup kills everything) starts a
// Spec — binary, arguments, extra environment, working directory, readiness — as a Process.
// Each run's stdout and stderr go, interleaved, to the name's log file (<dir>/<name>.log,
// appended run after run, with "=== " lines at each start and exit) and to a bounded
// in-memory tail (Tail, WaitOutput). Readiness (Spec.Ready) is a ready file such as the
// broker's FELIX_READY_FILE (checked to name the process's pid), an HTTP URL answering 200
// (the broker's /ready), or both, within a deadline. Stopping: Terminate (SIGTERM, a bounded
// drain wait, then SIGKILL and ErrDrainTimeout), Kill (SIGKILL, returns once the process is
// reaped), Pause and Resume (SIGSTOP and SIGCONT, each returning once /proc shows the new
// state). Restart runs the next run of a name with the same Spec or an edited one. PeakRSS
// is VmHWM of /proc/<pid>/status, sampled every RSSInterval and before each signal. Every
// wait is bounded by the caller's context or a documented constant; nothing sleeps.
//
// Disk faults (diskfault.go), for a stopped process's data: WipeDataDir (keeping named
// files, e.g. a node id), TruncateNewestSegment (a torn last record), FlipSealedByte (one
// inverted byte in a sealed segment's records), DeleteEpochs. MountTmpfs and
// MountTmpfsForTest give a small tmpfs for ENOSPC tests. Clock is the fake-clock hook: the
// variables EnvClockOffsetMS and EnvClockRate set on one process (see Clock for what a
// process must do with them).
//
// Traffic: the supervisor itself only reaches the ready URLs it is given, and refuses any
// outside 127.0.0.0/8, ::1 and testbed/netns's 10.213.0.0/16. docs/cluster-testing.md,
// "Process supervisor".
package supervisor
