import HeraldCore
@testable import HeraldWorker
import Testing

@Suite struct JobPlannerTests {
    @Test func aRefusedJobStillNamesItselfForItsRejectedEvent() {
        let tooBig = #"{"schema":"herald.job.v1","id":"spring.1","app_id":"shop","content":{"body":""# + String(repeating: "x", count: 300_000) + #""}}"#
        #expect(JobPlanner.identity(of: Array(tooBig.utf8)).map { "\($0.jobID) \($0.appID)" } == "spring.1 shop")
        let subJob = #"{"id":"spring.1:sa","parent_id":"spring.1","app_id":"shop","kind":7}"#
        #expect(JobPlanner.identity(of: Array(subJob.utf8))?.jobID == "spring.1", "a sub-job reports under the job the user sent")
    }

    @Test func noEventWithoutAValidIDAndApp() {
        for text in ["not json", #"{"id":"a b","app_id":"shop"}"#, #"{"id":"ok","app_id":"Not A Slug"}"#, #"{"id":"ok"}"#, "[]"] {
            #expect(JobPlanner.identity(of: Array(text.utf8)) == nil, "\(text)")
        }
    }
}
