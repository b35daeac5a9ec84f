// Produces one Herald job and waits for its completed event (docs/PRODUCING.md).
// NOT RUN in Herald's tests: confluent-kafka-go cannot be installed on the machines that build
// Herald. The Python example (examples/python/produce_job.py) is the tested one; this mirrors it.
//
//	go mod init example && go get github.com/confluentinc/confluent-kafka-go/v2/kafka
//	go run . -brokers localhost:9092 -app demo
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func main() {
	brokers := flag.String("brokers", "localhost:9092", "bootstrap servers")
	app := flag.String("app", "", "app id")
	jobsTopic := flag.String("jobs-topic", "herald.jobs", "")
	resultsTopic := flag.String("results-topic", "herald.results", "")
	flag.Parse()
	jobID := fmt.Sprintf("%s-go-%d", *app, time.Now().UnixNano())

	consumer, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": *brokers,
		"group.id": "produce-job-example-" + jobID, "auto.offset.reset": "latest", "enable.auto.commit": false})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer consumer.Close()
	_ = consumer.Subscribe(*resultsTopic, nil)

	producer, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": *brokers, "acks": "all", "enable.idempotence": true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer producer.Close()
	job := map[string]any{
		"schema": "herald.job.v1", "id": jobID, "app_id": *app, "kind": "notification",
		"created_at": time.Now().UTC().Format(time.RFC3339Nano), "audience": map[string]any{"all": true},
		"content": map[string]any{"title": "Hello from Go", "body": "Sent from the Go example."},
	}
	value, _ := json.Marshal(job)
	reports := make(chan kafka.Event, 1)
	if err := producer.Produce(&kafka.Message{TopicPartition: kafka.TopicPartition{Topic: jobsTopic, Partition: kafka.PartitionAny},
		Key: []byte(jobID), Value: value}, reports); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if report := (<-reports).(*kafka.Message); report.TopicPartition.Error != nil {
		fmt.Fprintln(os.Stderr, "produce failed:", report.TopicPartition.Error)
		os.Exit(2)
	}
	fmt.Println("produced job", jobID)

	deadline := time.Now().Add(120 * time.Second)
	for time.Now().Before(deadline) {
		message, err := consumer.ReadMessage(500 * time.Millisecond)
		if err != nil {
			continue
		}
		var receipt map[string]any
		if json.Unmarshal(message.Value, &receipt) != nil || receipt["job_id"] != jobID {
			continue
		}
		switch receipt["stage"] {
		case "completed":
			fmt.Println("completed:", receipt["totals"])
			os.Exit(0)
		case "rejected":
			fmt.Fprintln(os.Stderr, "rejected:", receipt["reason"])
			os.Exit(1)
		}
	}
	fmt.Fprintln(os.Stderr, "no completed event within 120 s")
	os.Exit(2)
}
