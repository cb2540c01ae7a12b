import { connect as amqpConnect } from 'amqplib';
import Redis from 'ioredis';
import { connectAsync as mqttConnect } from 'mqtt';
import { randomUUID } from 'node:crypto';
import { MQTT_URL, requireBroker, RMQ_URL } from '../support/microservice-app';
import { deleteKeysUnder, inspectionClient, testRedisUrl, uniquePrefix } from '../support/redis';
import { AppProcess, buildLibrary } from './app-process';
import { publishingOrder, unsettledOn, until } from './stream';

/**
 * Consumers SIGKILLed mid-stream while a broker redelivers and a publisher sends duplicates: every
 * event's side effect runs (none lost), runs twice only when a consumer died between doing it
 * and storing its completion (the documented crash window), and the surviving consumer leaves
 * nothing unacked. Side effects are counted in a Redis hash the handler increments.
 */
const MESSAGES = 300;
const DUPLICATE_SHARE = 0.4;
const LOCK_TTL = 2_000;

describe('message consumers killed mid-stream', () => {
  const prefix = uniquePrefix('consumers');
  let redis: Redis;

  beforeAll(() => {
    buildLibrary();
    redis = inspectionClient();
  }, 120_000);
  afterAll(async () => {
    await deleteKeysUnder(redis, prefix);
    await redis.quit();
  });

  /** Effect counts per id, and what each process reported. */
  async function tally(ids: string[], effectsKey: string, killed: AppProcess[]) {
    const effects = await redis.hgetall(effectsKey);
    const unique = [...new Set(ids)];
    const lost = unique.filter((id) => !Number(effects[id]));
    const twice = unique.filter((id) => Number(effects[id]) > 1);
    // The crash window: a killed consumer started the side effect but never stored the outcome.
    const window = unsettledOn(killed, 'EFFECT');
    // Delivered to a killed consumer (MQTT: acked on arrival) and never to anyone who settled it.
    const unsettledOnKilled = unsettledOn(killed, 'DELIVER');
    return { unique, lost, twice, window, unsettledOnKilled };
  }

  it(`RabbitMQ, manual ack, prefetch 20: ${MESSAGES} messages, 40% duplicates, two SIGKILLs`, async () => {
    await requireBroker('RabbitMQ', '127.0.0.1', Number(new URL(RMQ_URL).port));
    const queue = `idempotency-crash-${randomUUID().slice(0, 8)}`;
    const effectsKey = `${prefix}rmq-effects`;
    const start = () =>
      AppProcess.start(
        {
          TRANSPORT: 'rmq',
          BROKER_URL: RMQ_URL,
          QUEUE: queue,
          REDIS_URL: testRedisUrl(),
          KEY_PREFIX: `${prefix}rmq:`,
          LOCK_TTL: String(LOCK_TTL),
          EFFECTS_KEY: effectsKey,
        },
        'consumer-process.js',
      );
    const connection = await amqpConnect(RMQ_URL);
    const channel = await connection.createChannel();
    const consumers: AppProcess[] = [];
    try {
      consumers.push(await start(), await start());
      const ids = publishingOrder(MESSAGES, DUPLICATE_SHARE);
      for (const eventId of ids) {
        const message = { pattern: 'ledger.entry', data: { eventId } };
        channel.sendToQueue(queue, Buffer.from(JSON.stringify(message)));
      }
      const effects = () => consumers.reduce((n, c) => n + c.reports('EFFECT').length, 0);
      const killed: AppProcess[] = [];
      for (const [at, victim] of [
        [MESSAGES * 0.3, consumers[0]],
        [MESSAGES * 0.6, consumers[1]],
      ] as const) {
        await until(() => effects() >= at * (1 - DUPLICATE_SHARE), 60_000);
        await victim.stop('SIGKILL');
        killed.push(victim);
        if (killed.length === 1) consumers.push(await start());
      }
      const survivor = consumers[2];
      const unique = new Set(ids);
      // Done: every id's effect is in, and the survivor settled every delivery it received.
      await until(async () => {
        const done = await redis.hlen(effectsKey);
        const delivered = survivor.reports('DELIVER').length;
        const settled = survivor.reports('ACK').length + survivor.reports('NACK').length;
        const { messageCount } = await channel.checkQueue(queue);
        return done === unique.size && delivered === settled && messageCount === 0;
      }, 60_000);
      const { lost, twice, window } = await tally(ids, effectsKey, killed);
      console.log(
        `RabbitMQ: ${ids.length} messages, ${unique.size} ids; lost ${lost.length}; ` +
          `run twice ${twice.length} (in the crash window: ${window.size}); survivor delivered ` +
          `${survivor.reports('DELIVER').length}, acked ${survivor.reports('ACK').length}, ` +
          `nacked ${survivor.reports('NACK').length}`,
      );
      expect(lost).toEqual([]);
      expect(twice.filter((id) => !window.has(id))).toEqual([]);
      // Nothing unacked on the survivor: once it leaves, no message goes back to the queue.
      await survivor.stop();
      expect((await channel.checkQueue(queue)).messageCount).toBe(0);
    } finally {
      await Promise.all(consumers.map((c) => c.stop('SIGKILL')));
      await channel.deleteQueue(queue).catch(() => undefined);
      await connection.close();
    }
  }, 180_000);

  it(`MQTT QoS 1: ${MESSAGES} messages, 40% duplicates, two SIGKILLs`, async () => {
    await requireBroker('Mosquitto', '127.0.0.1', Number(new URL(MQTT_URL).port));
    const topic = `idempotency/crash/${randomUUID().slice(0, 8)}`;
    const clientId = `idempotency-crash-${randomUUID().slice(0, 8)}`;
    const effectsKey = `${prefix}mqtt-effects`;
    // One consumer at a time, resuming the same persistent session (clean: false): the broker
    // keeps QoS 1 messages for it while it is down.
    const start = () =>
      AppProcess.start(
        {
          TRANSPORT: 'mqtt',
          BROKER_URL: MQTT_URL,
          TOPIC: topic,
          CLIENT_ID: clientId,
          REDIS_URL: testRedisUrl(),
          KEY_PREFIX: `${prefix}mqtt:`,
          LOCK_TTL: String(LOCK_TTL),
          EFFECTS_KEY: effectsKey,
        },
        'consumer-process.js',
      );
    const publisher = await mqttConnect(MQTT_URL, { protocolVersion: 5 });
    const publish = (eventIds: string[]) =>
      Promise.all(
        eventIds.map((eventId) =>
          publisher.publishAsync(topic, JSON.stringify({ pattern: topic, data: { eventId } }), {
            qos: 1,
            properties: { userProperties: { 'Idempotency-Key': eventId } },
          }),
        ),
      );
    const consumers: AppProcess[] = [];
    try {
      consumers.push(await start());
      const ids = publishingOrder(MESSAGES, DUPLICATE_SHARE);
      const unique = [...new Set(ids)];
      const killed: AppProcess[] = [];
      // Half the messages per consumer; each is killed once it has run 30 handlers.
      for (const half of [ids.slice(0, MESSAGES / 2), ids.slice(MESSAGES / 2)]) {
        await publish(half);
        const victim = consumers[consumers.length - 1];
        await until(() => victim.reports('EFFECT').length >= 30, 60_000);
        await victim.stop('SIGKILL');
        killed.push(victim);
        consumers.push(await start());
      }
      const survivor = consumers[consumers.length - 1];
      // Nest's MQTT server acks (PUBACK) on arrival: what a killed consumer had received is gone
      // from the broker. The publisher retries what has no effect yet, as an at-least-once
      // publisher does (a new message per attempt), until every event ran.
      const effects = async () => redis.hgetall(effectsKey);
      const needingRetry = new Set<string>();
      await until(async () => {
        const done = await effects();
        const missing = unique.filter((id) => !Number(done[id]));
        const pending = survivor
          .reports('DELIVER')
          .filter((id) => !survivor.reports('SETTLED').includes(id));
        if (missing.length === 0) return pending.length === 0;
        const retry = missing.filter((id) => !survivor.reports('DELIVER').includes(id));
        retry.forEach((id) => needingRetry.add(id));
        if (pending.length === 0 && retry.length > 0) await publish(retry);
        return false;
      }, 60_000);
      const { lost, twice, window } = await tally(ids, effectsKey, killed);
      console.log(
        `MQTT: ${ids.length} messages, ${unique.length} ids; acked on arrival by a killed ` +
          `consumer and republished: ${needingRetry.size}; lost ${lost.length}; run twice ` +
          `${twice.length} (in the crash window: ${window.size})`,
      );
      expect(lost).toEqual([]);
      expect(twice.filter((id) => !window.has(id))).toEqual([]);
    } finally {
      await Promise.all(consumers.map((c) => c.stop('SIGKILL')));
      await publisher.endAsync();
    }
  }, 180_000);
});
