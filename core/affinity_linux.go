package core

import "golang.org/x/sys/unix"

// allowedCPUs returns the CPUs this process may run on (sched_getaffinity),
// in ascending order; nil when the call fails.
func allowedCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// pinThread binds the calling OS thread to cpu (sched_setaffinity with tid
// 0 = the calling thread). The caller has locked its goroutine to the thread.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set)
}
