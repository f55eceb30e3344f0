// Package prefetch asks the CPU to start loading a cache line that will be
// read soon, without waiting for it: what a hash table probed once per
// event needs when its entries do not fit the cache and there is other
// work to do in the meantime. Go has no prefetch builtin (the runtime's is
// internal), so the amd64 and arm64 versions are one instruction of
// assembly; elsewhere Line does nothing.
//
// A prefetch is a hint: it never faults, whatever the address, and never
// changes what a program computes, only when its loads find their data.
package prefetch
