/**
 * Contained commands of every tenant run as one host identity (the sandbox uid of a root server, or the server's own
 * uid): whatever they share by uid alone, besides the files the sandbox hides, is shared between tenants. System V
 * IPC is such a thing: its objects live in the IPC namespace, listed in /proc/sysvipc whatever the pid namespace,
 * and opened by whoever has the creator's uid. A command must not read nor remove another tenant's shared memory or
 * message queues, nor fill the host's IPC tables for everyone: it gets an IPC namespace of its own.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tokens } from '../e2e/berth-server.ts';
import { createNamed, run } from '../e2e/content-client.ts';
import { bwrap, sandboxGround, type SandboxGround } from './native-sandbox-fixture.ts';

// perl is on the host (read-only in the sandbox) and has shmget/shmread/msgget built in.
const CREATE = String.raw`perl -e '
  my $shm = shmget(0x42455254, 4096, 01000 | 0600) // die "shmget: $!";
  shmwrite($shm, "bob-secret-in-shm", 0, 17) or die "shmwrite: $!";
  my $q = msgget(0x42455255, 01000 | 0600) // die "msgget: $!";
  msgsnd($q, pack("l! a*", 1, "bob-secret-in-queue"), 0) or die "msgsnd: $!";
  print "made\n";'`;

const STEAL = String.raw`perl -e '
  open(my $f, "<", "/proc/sysvipc/shm") or die;
  <$f>;
  while (<$f>) {
    my @c = split;
    my $data;
    print "shm:$data\n" if shmread($c[1], $data, 0, 17);
    print "removed-shm\n" if shmctl($c[1], 0, 0);
  }
  open(my $q, "<", "/proc/sysvipc/msg") or die;
  <$q>;
  while (<$q>) {
    my @c = split;
    my $m;
    print "msg:" . substr($m, length(pack("l!", 0))) . "\n" if msgrcv($c[1], $m, 64, 0, 04000);
  }
  print "done\n";'`;

describe.skipIf(!bwrap)("a contained command cannot reach another tenant's System V IPC", () => {
  let g: SandboxGround;
  let bob: { id: string };

  beforeAll(async () => {
    g = await sandboxGround('Ipc');
    bob = await createNamed(g.server, 'Bob Ipc', tokens.bob, { contain: true });
  }, 120_000);
  afterAll(async () => {
    await g?.close();
  });

  it("reads nothing of bob's shared memory or message queue, and removes neither", async () => {
    const made = await run(g.server, bob.id, CREATE, tokens.bob);
    expect(made.stdout, made.stderr).toBe('made\n');
    const stolen = await g.sh(STEAL);
    expect(stolen.stderr).toBe('');
    expect(stolen.stdout).toBe('done\n');
  });
});
