import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';

/**
 * An SQS-protocol server on this machine for the SQS tests: local-aws-sqs (pure Node, MIT), in
 * the test's own process, on a free loopback port. It speaks the AWS JSON protocol that
 * @aws-sdk/client-sqs 3 sends, with FIFO queues, MessageDeduplicationId and visibility timeouts
 * (docs/consumers.md says why this emulator). When it cannot start, the suite fails naming it, in
 * CI and locally alike: nothing is skipped.
 */
export class SqsEmulator {
  private constructor(
    private readonly server: Server,
    /** `http://127.0.0.1:<port>`: the endpoint an SQSClient is given. */
    readonly endpoint: string,
    /** A client of the emulator (the producer's, and the one assertions read queues with). */
    readonly client: SQSClient,
  ) {}

  static async start(): Promise<SqsEmulator> {
    let server: Server;
    try {
      const { createSqsServer } = await import('local-aws-sqs');
      server = await createSqsServer({ port: 0, hostname: '127.0.0.1' });
    } catch (error) {
      throw new Error(
        `the SQS emulator (local-aws-sqs, a dev dependency) did not start: ${String(error)}`,
      );
    }
    const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return new SqsEmulator(server, endpoint, sqsClient(endpoint));
  }

  /** Creates a queue named uniquely after `name` (`.fifo` added for a FIFO queue): its URL. */
  async createQueue(name: string, attributes: Record<string, string> = {}): Promise<string> {
    const fifo = attributes.FifoQueue === 'true';
    const queueName = `${name}-${randomUUID().slice(0, 8)}${fifo ? '.fifo' : ''}`;
    const { QueueUrl } = await this.client.send(
      new CreateQueueCommand({ QueueName: queueName, Attributes: attributes }),
    );
    return QueueUrl!;
  }

  /** Messages still in the queue: visible, and received but neither deleted nor visible again. */
  async messagesIn(queueUrl: string): Promise<{ visible: number; inFlight: number }> {
    const { Attributes = {} } = await this.client.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
      }),
    );
    return {
      visible: Number(Attributes.ApproximateNumberOfMessages),
      inFlight: Number(Attributes.ApproximateNumberOfMessagesNotVisible),
    };
  }

  async deleteQueue(queueUrl: string): Promise<void> {
    await this.client.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => undefined);
  }

  async stop(): Promise<void> {
    this.client.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** An SQSClient of the emulator at `endpoint` (any credentials and region do). */
export function sqsClient(endpoint: string): SQSClient {
  return new SQSClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });
}
