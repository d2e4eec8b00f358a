//! The seccomp filter's program (classic BPF), built from the numbers it
//! refuses: a binary search over them instead of one comparison after
//! another. Pure; `privileges` installs it.
//!
//! Why a search: when a process installs a filter, the kernel runs it once
//! for every system call number of the architecture (about 460 on x86-64)
//! to learn which ones it always allows, and does so with interrupts off
//! (`seccomp_cache_prepare`). A list of 39 numbers compared one after the
//! other costs about 80 instructions a number there — 0.16 ms of every
//! confined spawn, paid while the engine waits for the child's `exec`
//! (bench/README.md, "Issue 38, tenth round"). The search takes at most
//! 16 instructions for any number, and decides every number exactly as the
//! list did (a test compares it with `seccompiler`'s on every number).

/// One instruction (the kernel's `struct sock_filter`).
pub(crate) type Insn = libc::sock_filter;

// The opcodes as the kernel spells them (`linux/bpf_common.h`); several
// of the parts are 0, so they are named rather than written as numbers.
const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JMP_JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const BPF_JMP_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_JMP_JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

/// Offsets in the kernel's `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

/// Where a jump of the search goes before the program's end is known.
#[derive(Clone, Copy)]
enum To {
    /// `n` instructions ahead of the next one.
    Ahead(usize),
    Allow,
    Refuse,
}

struct Op {
    code: u16,
    k: u32,
    yes: To,
    no: To,
}

/// The program: a system call of another architecture than `arch` (an
/// `AUDIT_ARCH_*`) kills the process; one whose number is in `refused`
/// returns `refuse` (an errno action); any other is allowed. `Err` if a jump
/// would not fit (never with the engine's list: a test builds it).
pub(crate) fn program(arch: u32, refused: &[u32], refuse: u32) -> Result<Vec<Insn>, String> {
    let mut sorted = refused.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut ops = Vec::new();
    search(&sorted, &mut ops);
    let mut out = vec![
        insn(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET),
        insn(BPF_JMP_JEQ_K, 1, 0, arch),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_KILL_PROCESS),
        insn(BPF_LD_W_ABS, 0, 0, NR_OFFSET),
    ];
    // The two returns follow the search.
    let (allow_at, refuse_at) = (ops.len(), ops.len() + 1);
    for (i, op) in ops.iter().enumerate() {
        let offset = |to: To| match to {
            To::Ahead(n) => n,
            To::Allow => allow_at - i - 1,
            To::Refuse => refuse_at - i - 1,
        };
        let (yes, no) = (offset(op.yes), offset(op.no));
        if op.code == BPF_JMP_JA {
            out.push(insn(op.code, 0, 0, yes as u32));
            continue;
        }
        let fits = |n: usize| u8::try_from(n).map_err(|_| format!("a jump of {n} in the seccomp filter"));
        out.push(insn(op.code, fits(yes)?, fits(no)?, op.k));
    }
    out.push(insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
    out.push(insn(BPF_RET_K, 0, 0, refuse));
    Ok(out)
}

/// The search over `sorted` (the number loaded): at a split, numbers at or
/// above the middle one go on to the upper half (right after), the others
/// jump over it to the lower half; two numbers or fewer are compared each.
fn search(sorted: &[u32], ops: &mut Vec<Op>) {
    if sorted.len() <= 2 {
        for &n in sorted {
            ops.push(Op { code: BPF_JMP_JEQ_K, k: n, yes: To::Refuse, no: To::Ahead(0) });
        }
        ops.push(Op { code: BPF_JMP_JA, k: 0, yes: To::Allow, no: To::Allow });
        return;
    }
    let mid = sorted.len() / 2;
    let split = ops.len();
    ops.push(Op { code: BPF_JMP_JGE_K, k: sorted[mid], yes: To::Ahead(0), no: To::Ahead(0) });
    search(&sorted[mid..], ops);
    ops[split].no = To::Ahead(ops.len() - split - 1);
    search(&sorted[..mid], ops);
}

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> Insn {
    Insn { code, jt, jf, k }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Instructions any number goes through, at most, with up to 64 refused
    /// numbers: the architecture's check (3), the load (1), the search, the
    /// return.
    pub(crate) const MAX_STEPS: usize = 16;

    /// Runs `prog` on a system call `(arch, nr)` as the kernel would for the
    /// instructions these programs use; returns the action and the number
    /// of instructions it took.
    pub(crate) fn run(prog: &[Insn], arch: u32, nr: u32) -> (u32, usize) {
        // The kernel's opcodes (linux/bpf_common.h), not this module's.
        const LD_ABS: u16 = 0x20;
        const JA: u16 = 0x05;
        const JEQ: u16 = 0x15;
        const JGT: u16 = 0x25;
        const JGE: u16 = 0x35;
        const JSET: u16 = 0x45;
        const RET: u16 = 0x06;
        let (mut a, mut pc, mut steps) = (0u32, 0usize, 0usize);
        loop {
            let i = prog[pc];
            steps += 1;
            pc += 1;
            let jump = |cond: bool| if cond { i.jt as usize } else { i.jf as usize };
            match (i.code, i.k) {
                (LD_ABS, 0) => a = nr,
                (LD_ABS, 4) => a = arch,
                (RET, k) => return (k, steps),
                (JA, k) => pc += k as usize,
                (JEQ, k) => pc += jump(a == k),
                (JGT, k) => pc += jump(a > k),
                (JGE, k) => pc += jump(a >= k),
                (JSET, k) => pc += jump(a & k != 0),
                (code, k) => panic!("instruction {code:#x} {k:#x} at {}", pc - 1),
            }
        }
    }

    #[test]
    fn the_search_refuses_exactly_its_numbers_in_few_steps() {
        let eperm = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
        for len in 0..64u32 {
            let refused: Vec<u32> = (0..len).map(|i| i * 7 + 3).collect();
            let prog = program(0xC000_003E, &refused, eperm).unwrap();
            for nr in 0..(len * 7 + 10) {
                let (action, steps) = run(&prog, 0xC000_003E, nr);
                let want = if refused.contains(&nr) { eperm } else { libc::SECCOMP_RET_ALLOW };
                assert_eq!(action, want, "{len} numbers, nr {nr}");
                assert!(steps <= MAX_STEPS, "{len} numbers, nr {nr}: {steps} steps");
            }
            assert_eq!(run(&prog, 0x4000_0003, 3).0, libc::SECCOMP_RET_KILL_PROCESS, "another architecture");
        }
    }
}
