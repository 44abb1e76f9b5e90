/*
 * ACPI C-states for the test VM of scripts/harness/vm. QEMU's own ACPI tables give the CPUs
 * no _CST, so the guest has no cpuidle states without this table. At each boot the harness
 * compiles it with iasl, NCPUS defined as the VM's CPU count (VM_SMP, 1 to 16) in a line it
 * puts before this file, and hands it to QEMU with -acpitable.
 *
 * Every CPU object QEMU declares (\_SB.CPUS.Cnnn, nnn the CPU index in hex) gets a _CST with
 * C1 by HLT (FFixedHW), C2 and C3 by reading the I/O ports 0x614 and 0x615 (ICH9 P_LVL2 and
 * P_LVL3: nothing answers, so the "sleep" returns at once). acpi_idle turns them into POLL,
 * C1, C2 and C3. C2 and C3 are fake: a guest idling in them busy-loops a host core, so the
 * guest disables them at each boot (gpufleet-vm-cstates.service) unless told otherwise.
 */
#ifndef NCPUS
#error NCPUS (the number of CPUs) must be defined before this file
#endif
#if NCPUS > 16
#error at most 16 CPUs
#endif
DefinitionBlock ("", "SSDT", 2, "GPUFLT", "CSTATES", 1)
{
    /*
     * The states, the same for every CPU: a count, then per state its register, type (C1, C2,
     * C3), worst-case latency (microseconds) and average power (milliwatts).
     */
    Scope (\_SB)
    {
        Method (GFCS, 0, NotSerialized)
        {
            Return (Package () {
                3,
                Package () { ResourceTemplate () { Register (FFixedHW, 0, 0, 0) }, 1, 1, 1000 },
                Package () { ResourceTemplate () { Register (SystemIO, 8, 0, 0x614) }, 2, 50, 500 },
                Package () { ResourceTemplate () { Register (SystemIO, 8, 0, 0x615) }, 3, 150, 100 }
            })
        }
    }

    /* A _CST for each of the VM's NCPUS CPUs. */
    External (\_SB.CPUS.C000, DeviceObj)
    Scope (\_SB.CPUS.C000) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#if NCPUS > 1
    External (\_SB.CPUS.C001, DeviceObj)
    Scope (\_SB.CPUS.C001) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 2
    External (\_SB.CPUS.C002, DeviceObj)
    Scope (\_SB.CPUS.C002) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 3
    External (\_SB.CPUS.C003, DeviceObj)
    Scope (\_SB.CPUS.C003) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 4
    External (\_SB.CPUS.C004, DeviceObj)
    Scope (\_SB.CPUS.C004) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 5
    External (\_SB.CPUS.C005, DeviceObj)
    Scope (\_SB.CPUS.C005) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 6
    External (\_SB.CPUS.C006, DeviceObj)
    Scope (\_SB.CPUS.C006) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 7
    External (\_SB.CPUS.C007, DeviceObj)
    Scope (\_SB.CPUS.C007) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 8
    External (\_SB.CPUS.C008, DeviceObj)
    Scope (\_SB.CPUS.C008) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 9
    External (\_SB.CPUS.C009, DeviceObj)
    Scope (\_SB.CPUS.C009) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 10
    External (\_SB.CPUS.C00A, DeviceObj)
    Scope (\_SB.CPUS.C00A) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 11
    External (\_SB.CPUS.C00B, DeviceObj)
    Scope (\_SB.CPUS.C00B) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 12
    External (\_SB.CPUS.C00C, DeviceObj)
    Scope (\_SB.CPUS.C00C) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 13
    External (\_SB.CPUS.C00D, DeviceObj)
    Scope (\_SB.CPUS.C00D) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 14
    External (\_SB.CPUS.C00E, DeviceObj)
    Scope (\_SB.CPUS.C00E) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
#if NCPUS > 15
    External (\_SB.CPUS.C00F, DeviceObj)
    Scope (\_SB.CPUS.C00F) { Method (_CST, 0, NotSerialized) { Return (\_SB.GFCS ()) } }
#endif
}
