// Produces one Herald job and waits for its completed event (docs/PRODUCING.md).
// NOT RUN in Herald's tests: the npm registry is not reachable from the machines that build
// Herald. The Python example (examples/python/produce_job.py) is the tested one; this mirrors it.
//
//   npm install kafkajs
//   node produce-job.mjs localhost:9092 demo
import { Kafka } from "kafkajs";

const [brokers = "localhost:9092", app = "demo"] = process.argv.slice(2);
const jobID = `${app}-node-${Date.now()}`;
const kafka = new Kafka({ clientId: "herald-example", brokers: brokers.split(",") });

const consumer = kafka.consumer({ groupId: `produce-job-example-${jobID}` });
await consumer.connect();
await consumer.subscribe({ topic: "herald.results", fromBeginning: false });

// idempotent: a retried send is written once; acks -1 waits for every in-sync replica.
const producer = kafka.producer({ idempotent: true });
await producer.connect();
await producer.send({
  topic: "herald.jobs",
  acks: -1,
  messages: [{
    key: jobID,
    value: JSON.stringify({
      schema: "herald.job.v1", id: jobID, app_id: app, kind: "notification",
      created_at: new Date().toISOString(), audience: { all: true },
      content: { title: "Hello from Node", body: "Sent from the Node example." },
    }),
  }],
});
console.log(`produced job ${jobID}`);

const timer = setTimeout(() => { console.error("no completed event within 120 s"); process.exit(2); }, 120_000);
await consumer.run({
  eachMessage: async ({ message }) => {
    let receipt;
    try { receipt = JSON.parse(message.value.toString()); } catch { return; }
    if (receipt.job_id !== jobID) return;
    if (receipt.stage === "completed") { console.log("completed:", receipt.totals); clearTimeout(timer); process.exit(0); }
    if (receipt.stage === "rejected") { console.error("rejected:", receipt.reason); clearTimeout(timer); process.exit(1); }
  },
});
