/*
 * What the sandbox's per-process steps cost in the kernel (issue 24; the
 * figures are in docs/sandbox.md, "Cost"). Each is timed inside a child
 * made as the engine makes provider processes (vfork: memory shared, the
 * parent suspended), median and 90th percentile of N runs:
 *
 *   - joining a namespace made once (setns: network, mount) against making
 *     a network or mount namespace per process (unshare);
 *   - a cgroup per process: mkdir + opening cgroup.procs (parent), the
 *     child's write of "0" (its move), rmdir after it exited.
 *
 * Needs root (namespaces, cgroups); the cgroup2 mount is found in
 * /proc/self/mountinfo. Build and run:
 *
 *   cc -O2 -o /tmp/spawn_confinement bench/spawn_confinement.c && /tmp/spawn_confinement [N]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    printf("%-44s median %8.1f us   p90 %8.1f us\n", what, v[n / 2] * 1e6, v[n * 9 / 10] * 1e6);
}

/* The cgroup2 mount point, from /proc/self/mountinfo. */
static int cgroup2(char *out, size_t len) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        char *sep = strstr(line, " - cgroup2 ");
        if (!sep) continue;
        char root[1024], mount[1024];
        if (sscanf(line, "%*s %*s %*s %1023s %1023s", root, mount) == 2) {
            snprintf(out, len, "%s", mount);
            fclose(f);
            return 0;
        }
    }
    if (f) fclose(f);
    return -1;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 300;
    if (n < 10 || n > 100000) n = 300;
    double *setns_net = calloc(n, sizeof(double)), *setns_mnt = calloc(n, sizeof(double));
    double *unshare_net = calloc(n, sizeof(double)), *unshare_mnt = calloc(n, sizeof(double));
    double *mk = calloc(n, sizeof(double)), *join = calloc(n, sizeof(double)), *rm = calloc(n, sizeof(double));
    char base[1024];
    if (cgroup2(base, sizeof base) != 0) {
        fprintf(stderr, "no cgroup2 mount\n");
        return 1;
    }
    int net = open("/proc/self/ns/net", O_RDONLY), mnt = open("/proc/self/ns/mnt", O_RDONLY);
    for (int i = 0; i < n; i++) {
        char dir[1200], procs[1300];
        double t = now();
        snprintf(dir, sizeof dir, "%s/bench-confinement-%d-%d", base, getpid(), i);
        if (mkdir(dir, 0755) != 0) { perror("mkdir"); return 1; }
        snprintf(procs, sizeof procs, "%s/cgroup.procs", dir);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        mk[i] = now() - t;
        volatile double *j = &join[i], *sn = &setns_net[i], *sm = &setns_mnt[i];
        volatile double *un = &unshare_net[i], *um = &unshare_mnt[i];
        pid_t c = vfork();
        if (c == 0) {
            double a = now();
            if (write(fd, "0", 1) != 1) _exit(2);
            *j = now() - a;
            a = now();
            if (setns(net, CLONE_NEWNET) != 0) _exit(3);
            *sn = now() - a;
            a = now();
            if (setns(mnt, CLONE_NEWNS) != 0) _exit(4);
            *sm = now() - a;
            a = now();
            if (unshare(CLONE_NEWNET) != 0) _exit(5);
            *un = now() - a;
            a = now();
            if (unshare(CLONE_NEWNS) != 0) _exit(6);
            *um = now() - a;
            _exit(0);
        }
        int status;
        waitpid(c, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "child failed: %d\n", status); return 1; }
        close(fd);
        t = now();
        if (rmdir(dir) != 0) { perror("rmdir"); return 1; }
        rm[i] = now() - t;
    }
    printf("%d runs\n", n);
    report("cgroup: mkdir + open cgroup.procs (parent)", mk, n);
    report("cgroup: the child's move (write \"0\")", join, n);
    report("cgroup: rmdir after exit", rm, n);
    report("setns(network namespace made once)", setns_net, n);
    report("setns(mount namespace made once)", setns_mnt, n);
    report("unshare(CLONE_NEWNET) per process", unshare_net, n);
    report("unshare(CLONE_NEWNS) per process", unshare_mnt, n);
    return 0;
}
