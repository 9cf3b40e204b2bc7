#!/usr/bin/env node
// kafkajs against a broker, with the client's default settings: produce to
// a new topic, join a consumer group, consume what was produced, commit,
// leave the group, and create a topic through the admin API. Fails (exit 1, saying which step) unless every step works
// and the leave is answered without error: the client logs no error (it logs
// one for a LeaveGroup answer it cannot read), and the group is empty right
// after (a member that did not leave would stay in it for its session
// timeout, 30 s by default).
//
// Usage: NODE_PATH=DIR/node_modules kafkajs_check.js HOST:PORT

'use strict'

const crypto = require('crypto')
const { Kafka, logLevel } = require('kafkajs')
const { version } = require('kafkajs/package.json')

const NAME = 'kafkajs'
const COUNT = 3

const broker = process.argv[2]
if (!broker) {
  console.error('usage: kafkajs_check.js HOST:PORT')
  process.exit(2)
}
const run = crypto.randomBytes(4).toString('hex')
const topic = `kjs-topic-${run}`
const groupId = `kjs-group-${run}`

// The client's own log lines of level ERROR (at its default level, INFO).
const errors = []
const logCreator = () => ({ level, log }) => {
  if (level === logLevel.ERROR) errors.push(`${log.message}${log.error ? ` (${log.error})` : ''}`)
}

let step = 'start'
function fail (detail) {
  console.error(`${NAME}: FAILED to ${step}: ${detail}`)
  process.exit(1)
}

async function withTimeout (what, ms, promise) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000} s`)), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

async function main () {
  process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
  const kafka = new Kafka({ clientId: 'kafkajs-check', brokers: [broker], logCreator })
  console.log(`${NAME} ${version}: broker ${broker}, topic ${topic}, group ${groupId}`)

  step = 'produce'
  const producer = kafka.producer()
  await producer.connect()
  const messages = Array.from({ length: COUNT }, (_, i) => ({ value: `message ${i}` }))
  const sent = await producer.send({ topic, messages })
  await producer.disconnect()
  if (sent.length !== 1 || sent[0].errorCode !== 0 || sent[0].baseOffset !== '0') {
    fail(`answer ${JSON.stringify(sent)}, expected partition 0 from offset 0`)
  }
  console.log(`${NAME}: produced ${COUNT} messages to ${topic} (offsets 0-${COUNT - 1})`)

  step = 'join the group and consume'
  const consumer = kafka.consumer({ groupId })
  const leaves = []
  consumer.on(consumer.events.REQUEST, ({ payload }) => {
    if (payload.apiName === 'LeaveGroup') leaves.push(payload.apiVersion)
  })
  let joined
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => { joined = payload })
  await consumer.connect()
  // fromBeginning: the messages were produced before the group existed.
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = []
  let all
  const done = new Promise(resolve => { all = resolve })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ message }) => {
      got.push(message.value.toString())
      if (got.length === COUNT) all()
    }
  })
  await withTimeout('consuming', 30000, done)
  const want = messages.map(m => m.value)
  if (JSON.stringify(got) !== JSON.stringify(want)) fail(`got ${JSON.stringify(got)}`)
  const assigned = joined && joined.memberAssignment[topic]
  if (!assigned || assigned.length !== 1 || assigned[0] !== 0) {
    fail(`assignment ${JSON.stringify(joined && joined.memberAssignment)}, expected ${topic}/0`)
  }
  console.log(`${NAME}: joined ${groupId} as ${joined.memberId}, assigned ${topic}/0, consumed ${COUNT} messages`)

  step = 'commit'
  await consumer.commitOffsets([{ topic, partition: 0, offset: String(COUNT) }])
  const admin = kafka.admin()
  await admin.connect()
  const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] })
  const committed = offsets.partitions.find(p => p.partition === 0)
  if (!committed || committed.offset !== String(COUNT)) fail(`committed ${JSON.stringify(offsets)}, expected ${COUNT}`)
  console.log(`${NAME}: committed offset ${COUNT}`)

  step = 'leave the group'
  await withTimeout('disconnecting', 30000, consumer.disconnect())
  if (leaves.length !== 1) fail(`${leaves.length} LeaveGroup requests answered, expected 1`)
  // An answer kafkajs cannot read is logged, not thrown.
  if (errors.length) fail(`the client logged: ${errors.join('; ')}`)
  const { groups } = await admin.describeGroups([groupId])
  const group = groups.find(g => g.groupId === groupId)
  if (!group || group.errorCode !== 0 || group.state !== 'Empty' || group.members.length !== 0) {
    fail(`right after the leave the group is ${JSON.stringify(group)}, expected Empty with no members`)
  }
  console.log(`${NAME}: left ${groupId} (LeaveGroup v${leaves[0]}): answered without error, and the group is Empty`)

  step = 'create a topic with the admin API'
  const created = `${topic}-created`
  const asked = { topics: [{ topic: created, numPartitions: 3 }], waitForLeaders: true }
  if (await admin.createTopics(asked) !== true) fail(`${created} was not created`)
  const { topics } = await admin.fetchTopicMetadata({ topics: [created] })
  if (topics[0].partitions.length !== 3) fail(`${created} has ${topics[0].partitions.length} partitions, expected 3`)
  // false: TOPIC_ALREADY_EXISTS, which kafkajs does not throw but logs as an
  // error (as it would against Kafka): that one line is expected.
  const before = errors.length
  if (await admin.createTopics(asked) !== false) fail('creating it again was not refused')
  const logged = errors.splice(before)
  if (logged.length !== 1 || !logged[0].includes('CreateTopics')) fail(`the client logged: ${logged.join('; ')}`)
  await admin.disconnect()
  console.log(`${NAME}: created ${created} with 3 partitions; creating it again is refused (TOPIC_ALREADY_EXISTS)`)

  step = 'run without client errors'
  if (errors.length) fail(errors.join('; '))
  console.log(`${NAME}: ok`)
}

main().catch(err => fail(err.stack || String(err)))
