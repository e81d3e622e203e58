// Node's redlock 4.2.0 with ioredis against a server (tallyd or redis-server): acquire,
// extend, release, a lock on two keys, a lost lock, and contention from many workers with
// a counter inside the critical section. Prints one line per step (the test compares the
// servers' transcripts) and exits 1 if any step is not what the library's users rely on.
'use strict';
const Redis = require('ioredis');
const Redlock = require('redlock');

const [host, port] = [process.argv[2], Number(process.argv[3])];
let failed = false;

// step prints the step's result and remembers one that is not want.
function step(name, got, want) {
	const ok = JSON.stringify(got) === JSON.stringify(want);
	console.log(`${name}: ${JSON.stringify(got)}` + (ok ? '' : `  <-- want ${JSON.stringify(want)}`));
	if (!ok) failed = true;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// outcome is the name of the error a promise rejects with, or "ok".
async function outcome(p) {
	try {
		await p;
		return 'ok';
	} catch (e) {
		return e.name;
	}
}

async function main() {
	const clients = [];
	const client = () => {
		const c = new Redis({ host, port, maxRetriesPerRequest: 1, enableOfflineQueue: true });
		clients.push(c);
		return c;
	};
	const r = client();
	await r.del('job', 'job2', 'a', 'b', 'lost', 'busy');
	const redlock = new Redlock([r], { retryCount: 0, driftFactor: 0.01 });
	const errors = [];
	redlock.on('clientError', (e) => errors.push(e.message));

	// Acquire, extend, release.
	let lock = await redlock.lock('job', 2000);
	step('key holds the lock value', (await r.get('job')) === lock.value, true);
	const pttl = await r.pttl('job');
	step('pttl near 2000', pttl > 1000 && pttl <= 2000, true);
	step('second acquire while held', await outcome(redlock.lock('job', 2000)), 'LockError');
	lock = await lock.extend(5000);
	const pttl2 = await r.pttl('job');
	step('pttl after extend near 5000', pttl2 > 4000 && pttl2 <= 5000, true);
	step('release', await outcome(lock.unlock()), 'ok');
	step('key gone after release', await r.exists('job'), 0);
	step('release again', await outcome(lock.unlock()), 'LockError');

	// Release from another connection than the acquire's.
	const r2 = client();
	const other = new Redlock([r2], { retryCount: 0 });
	lock = await redlock.lock('job2', 2000);
	lock.redlock = other;
	step('release from another connection', await outcome(lock.unlock()), 'ok');
	step('key gone after that release', await r.exists('job2'), 0);

	// A lock on two keys at once.
	lock = await redlock.lock(['a', 'b'], 2000);
	step('both keys hold the lock value', (await r.mget('a', 'b')).every((v) => v === lock.value), true);
	step('either key blocks a lock on it', await outcome(redlock.lock('b', 2000)), 'LockError');
	step('release both', await outcome(lock.unlock()), 'ok');
	step('both gone', await r.exists('a', 'b'), 0);

	// A lost lock: it expires, another takes it; the old one cannot release or extend it.
	const old = await redlock.lock('lost', 150);
	await sleep(250);
	const now = await redlock.lock('lost', 5000);
	old.expiration = Date.now() + 1000; // past the library's own clock check, to ask the server
	step('old extend', await outcome(old.extend(1000)), 'LockError');
	step('old release', await outcome(old.unlock()), 'LockError');
	step('new owner still holds', (await r.get('lost')) === now.value, true);
	await now.unlock();

	// Contention: workers on four connections take the lock in turn; a counter inside the
	// critical section must never see two holders, and each release must find its own value.
	const pool = [r, r2, client(), client()].map((c) => new Redlock([c], { retryCount: -1, retryDelay: 5, retryJitter: 3 }));
	let inside = 0, doubles = 0, holds = 0, lostReleases = 0;
	const workers = [];
	for (let w = 0; w < 16; w++) {
		workers.push((async () => {
			for (let i = 0; i < 8; i++) {
				const l = await pool[w % pool.length].lock('busy', 1000);
				if (++inside > 1) doubles++;
				holds++;
				await sleep(1);
				inside--;
				if ((await outcome(l.unlock())) !== 'ok') lostReleases++;
			}
		})());
	}
	await Promise.all(workers);
	step('contention holds', holds, 128);
	step('contention double holds', doubles, 0);
	step('contention releases that found another value', lostReleases, 0);
	step('client errors', errors, []);

	clients.forEach((c) => c.disconnect());
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
	console.log(`error: ${e && e.stack ? e.stack : e}`);
	process.exit(1);
});
